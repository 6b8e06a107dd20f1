"""Tools the LLM can call: one typed parameter structure per tool is both the function schema
sent to the model and the validator of what the model sends back."""
