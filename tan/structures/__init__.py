"""Plain data structures and their geometry, shared by modeling, data and evaluation."""
