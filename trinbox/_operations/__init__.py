"""What the ``trinbox`` command does to an app's queues besides serving them: their depth,
their dead letters, and the redrive of dead letters back into their queues."""
