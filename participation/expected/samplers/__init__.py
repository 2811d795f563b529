"""The Monte-Carlo samplers of ``monte_carlo``: ``sampler`` the protocol, one module per
sampler, ``streams`` the keyed bit streams they share, ``_torch_delay`` the device path of
whole traces."""
