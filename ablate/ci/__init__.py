"""ablate in CI: the gate that turns a report into a pass/fail decision, and generated CI / Kubernetes files."""
