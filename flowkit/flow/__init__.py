"""The flow: schedules (paths from noise to data), flow-time samplers, ODE solvers."""
