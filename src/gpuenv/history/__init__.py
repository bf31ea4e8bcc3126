"""Results history: compare two runs, find change points over many, build the report site."""
