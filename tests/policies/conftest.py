"""Policy tests never touch the network: the checker's Hugging Face Hub lookups (on by default in the CLI) answer from
the local cache only, in this process and in every checker process a test starts."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
