"""pulsebox: run untrusted commands in pulsebox sandboxes from Python (standard library only).

The `Sandbox` facade has the reference agent's API (`pulse.sandbox.api`) by
the same names; see python/README.md for where it deliberately differs.
"""

from .errors import (SandboxConcurrentModificationError, SandboxConfigError,
                     SandboxError, SandboxForbiddenError, SandboxNotFoundError, SandboxPermissionError,
                     SandboxSecurityError, SandboxUnavailableError, SandboxUnsupportedPolicyError,
                     error_from_protocol)
from .lifecycle import ALLOWED_TRANSITIONS, InvalidTransitionError, LifecycleState, SandboxExecution
from .limits import ExecutionMetrics, ResourceLimits, ResourcePolicy
from .network import NetworkEnforcementLevel, NetworkMode, NetworkPolicy, NetworkProtocol, NetworkRule
from .policy import ActionType, PolicyDecision, PolicyRule, SandboxPolicy
from .process import ProcessResult
from .sandbox import Sandbox, SandboxSession, Transaction
from .secrets import SecretEnforcementLevel, SecretMode, SecretPolicy, SecretScrubber
from .sync import SyncSandbox
from .transport_socket import LocalServer

CoWTransaction = Transaction

__version__ = "0.1.0"

__all__ = [
    "ALLOWED_TRANSITIONS", "ActionType", "CoWTransaction", "ExecutionMetrics", "InvalidTransitionError",
    "LifecycleState", "LocalServer", "NetworkEnforcementLevel", "NetworkMode", "NetworkPolicy",
    "NetworkProtocol", "NetworkRule", "PolicyDecision", "PolicyRule", "ProcessResult",
    "ResourceLimits", "ResourcePolicy", "Sandbox",
    "SandboxConcurrentModificationError", "SandboxConfigError", "SandboxError", "SandboxExecution",
    "SandboxForbiddenError", "SandboxNotFoundError", "SandboxPermissionError", "SandboxPolicy",
    "SandboxSecurityError", "SandboxSession", "SandboxUnavailableError", "SandboxUnsupportedPolicyError",
    "SecretEnforcementLevel", "SecretMode", "SecretPolicy", "SecretScrubber", "SyncSandbox",
    "Transaction", "error_from_protocol",
]
