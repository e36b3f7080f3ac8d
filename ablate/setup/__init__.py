"""Reading the user's setup: the layer catalog and kinds, cells, tasks and the inventory."""
