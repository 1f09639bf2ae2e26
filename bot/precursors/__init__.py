"""What preceded the faults: /hw-faults why. A pure core; ports for what it reads."""
