"""Static half of autograd-fix: rules (libcst visitors) and the engine that runs them."""
