"""Database drivers behind one narrow protocol; the only code that touches driver modules."""
