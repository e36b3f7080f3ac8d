"""The command line: a thin shell over the library, one module per command group; ``main`` composes them."""
