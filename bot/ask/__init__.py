"""Questions in plain words (mentions and DMs) read into one of the commands. No I/O."""
