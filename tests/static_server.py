"""A static OpenAI-compatible endpoint for `make bench`: every POST gets the same chat completion
at once, from a bare asyncio protocol (no framework), so that the client, not the server, is
what a throughput figure measures. Run as `python -m tests.static_server`: prints its URL."""

from __future__ import annotations

import asyncio
import sys

import orjson

BODY = orjson.dumps(
    {
        "id": "chatcmpl-static",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": '{"value": 3}'},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 6, "total_tokens": 126},
    }
)
RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
    + str(len(BODY)).encode()
    + b"\r\n\r\n"
    + BODY
)


class Static(asyncio.Protocol):
    def connection_made(self, transport) -> None:
        self.transport, self.buffer = transport, b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end == -1:
                return
            length = 0
            for line in self.buffer[:head_end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            end = head_end + 4 + length
            if len(self.buffer) < end:
                return
            self.buffer = self.buffer[end:]
            self.transport.write(RESPONSE)


async def main() -> None:
    server = await asyncio.get_running_loop().create_server(Static, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"http://127.0.0.1:{port}/v1", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
