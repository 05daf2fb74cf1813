"""From a validated spec and the facts to the serving plans the builders read: every derived number, computed once."""
