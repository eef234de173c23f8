"""Peer toolkits that throughput.py measures side by side with the project (``--peers``)."""
