"""Learning from outcomes: the Observe RPC, rewards, and the strategy selector state."""
