"""PPO time-to-reward: suites, trainers (SB3, Brax PPO), the EnvPool/JAX -> SB3 VecEnv adapters."""
