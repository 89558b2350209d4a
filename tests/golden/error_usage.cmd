catalog list --min-memory-gb lots
