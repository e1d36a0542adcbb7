"""Training and evaluation of FIBER models with Accelerate."""
