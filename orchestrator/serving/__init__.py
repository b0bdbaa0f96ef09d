"""Model servers this tool starts: the llama.cpp server (llama.py, llama_serve.py); its Ray
replicas are in orchestrator/cluster/."""
