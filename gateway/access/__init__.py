"""Who may do what: API keys to tenants, the admin role, watch tokens, revocation, the audit
log of operators' actions, and jobs as their tenant may reach them."""
