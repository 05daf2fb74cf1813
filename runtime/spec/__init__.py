"""The typed deployment spec (pydantic v2): what a stack file may say, each field with its default and reason."""
