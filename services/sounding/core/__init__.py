"""Pure algorithms on numpy/scipy. Imports nothing else of Sounding's."""
