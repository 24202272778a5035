"""Multi-token decode steps: proposals (proposer.py: grammar-forced tokens, prompt lookup) computed with the
sequence's last token in one span, kept where sampling agrees (verify.py)."""
from conch.engine.backends.conch.speculation.proposer import Speculation
from conch.engine.backends.conch.speculation.verify import verify

__all__ = ["Speculation", "verify"]
