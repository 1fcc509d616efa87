"""What a table is and how it got there, read from its timeline and files and never written: the
numbers ``lakehouse timeline`` / ``lakehouse stats`` print and the Lakehouse view draws."""
