"""A2A both ways (``a2a-sdk``): every served agent is an A2A agent whose tasks are its runs
(``card``, ``states``, ``tasks``, ``handler``, ``routes``, mounted by the webhook), and an app
calls remote A2A agents as tools (``peers``)."""
