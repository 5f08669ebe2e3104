"""The FUSE front end: `mount()`/`unmount()` in mount.py, the tree in tree.py, callbacks in operations.py."""
