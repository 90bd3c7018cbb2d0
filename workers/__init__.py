"""The generation worker process: runs genq Workers over the provider queues."""
