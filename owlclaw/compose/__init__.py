"""The composition root: where the configuration meets the views, the recall store, the timer
registrations (``read``) and the agents' placement (``write``). ``owlclaw run``, the CLI, the
demo, the benches and the timer service processes build through it. Nothing is imported here, so
a command that only reads views never imports the write side (Ray, the agents' runtime)."""
