"""ticketsim: learn similarity between short queries and long historical tickets, retrieve solutions."""
