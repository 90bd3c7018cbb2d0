"""Accepting generations: validation, idempotency, the tenant limits (rate, daily quota, in
flight, open streams and waits), budget reservations, and the request bodies that enqueue."""
