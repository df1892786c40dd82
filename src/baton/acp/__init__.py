"""Connection layer: the tapping transport, the host-side ACP client, ``_baton/*`` extensions."""
