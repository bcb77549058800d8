"""A train-step peer that computes another model (switchyard-bench-torch.test)."""
import json
print(json.dumps({"torch": "none", "check_loss": 1.0, "params": 7,
                  "results": {}}))
