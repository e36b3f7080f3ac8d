"""The command-line shell over ablate's library. One module per command group; ``main`` composes them."""
