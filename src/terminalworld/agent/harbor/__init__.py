"""Harbor: the SWE-ZERO agent (`agent`), the sandbox and simulated environments (`environment`) and
the job runner (`job`), which load only inside Harbor's own environment, and the host side that
builds that environment and launches jobs in it (`runtime`)."""
