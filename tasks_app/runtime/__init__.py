"""What every process takes from its surroundings: the database's clock, the cache's
keys, the process's hardening, the client's address, Django's task framework and the run log."""
