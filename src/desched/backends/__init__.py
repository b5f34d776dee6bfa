"""desched.backends: both implementations of each seam, side by side (simulated and API)."""
