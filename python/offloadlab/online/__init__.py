"""Model-driven online placement (seed 000 §6, made real) on the live testbed server.

The server in handoff mode with placement on (``ServerOptions.placement``) sends a
fraction f_c of each size class's new connections to the engine and accounts, per
class, the work each side does per request. Here:

- :mod:`~offloadlab.online.estimate` turns the server's live stats into per-class
  arrival rates and service-time moments over a sliding window;
- :mod:`~offloadlab.online.control` re-solves the multi-class model every control
  period for the fractions that minimise the mean delay, and applies them with
  hysteresis, a minimum dwell time and an alarm when the engine lags its prediction.
"""
