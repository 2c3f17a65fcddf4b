"""The MariaDB / MySQL store kind."""
