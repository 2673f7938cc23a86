"""What the workflow's jobs cost, from their own records: the paper-shape smoke run's table and
`dpvip bench workflow`."""
