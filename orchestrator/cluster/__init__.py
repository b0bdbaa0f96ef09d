"""Model replicas placed on a Ray cluster (`[models.server] backend = "ray"`): the engine stays one
process, the llama.cpp servers run as Ray actors on the cluster's nodes."""
