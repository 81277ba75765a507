"""The night: the training loop around one document — replay, reflect, edit, gate,
consolidate, test — its other agents' copies, and the staged proposal."""
