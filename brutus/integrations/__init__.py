"""brutus as the session store of the agent SDKs people build with (optional extras).

- ``brutus.integrations.claude_agent_sdk.BrutusSessionStore``: the Claude Agent SDK's ``SessionStore``
  (``pip install 'brutus-store[claude-agent-sdk]'``).
- ``brutus.integrations.openai_agents.BrutusSession``: OpenAI Agents' ``Session``
  (``pip install 'brutus-store[openai-agents]'``).

Both keep the SDK's own records exactly (``transcripts``) and parse them into a brutus session as they
arrive, so the SDK reads back what it wrote while brutus shows, prunes and compacts the session. Nothing here
is imported by ``import brutus``; each module imports its SDK when it is imported itself, and says what to
install when the SDK is missing.

Floor: built on a store (``AsyncSessionStore``), through its public calls and ``store.run`` of the
integration's own operations (``transcripts``); a new SDK is one module here.
"""
