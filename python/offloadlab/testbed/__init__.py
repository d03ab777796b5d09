"""The testbed: real HTTP load against a real server.

:mod:`offloadlab.testbed.load` drives the Rust load generator with a request stream.
The server with its software offload engine comes with the testbed issue.
"""
