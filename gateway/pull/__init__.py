"""Workers anywhere: the long poll of the pull routes, signed receipts, and the routes' bodies
(the routes themselves: ``gateway/routes/pull.py``)."""
