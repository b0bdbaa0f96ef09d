"""`orchestrator emulate`: a loopback server that speaks the providers' protocols, enforces
request and token limits the way they do, and injects faults on demand."""
