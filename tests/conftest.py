import os

from hypothesis import HealthCheck, settings

# "ci" keeps `make test` bounded and deterministic; "deep" is `make test-deep`.
# (ctxsim.harness.testing registers the same profiles for users of the property kit.)
settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("deep", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
os.environ.setdefault("HYPOTHESIS_PROFILE", "ci")  # the property kit reads it too (ctxsim.harness.testing)
settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])
