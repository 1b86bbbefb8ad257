"""The words and bounds of tasks and runs: the fixed vocabularies (statuses, triggers, task
names), the field rules with their bounds and wording, how values read as text and which
payload fields are secret. Pure: no models, no queries."""
