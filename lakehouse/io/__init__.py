"""Reading and writing a table's data files: the handles that write base and log files for the
writer and the compactor, the markers that track them, the bloom filters in base file footers."""
