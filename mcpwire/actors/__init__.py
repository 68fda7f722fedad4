"""Actors: the only code in mcpwire that awaits. One actor per connection, each owning its nursery."""
